/* Which of a few short needles occur in a text, in one pass: what masking asks of every output before it runs
   a pattern (a pattern whose literal opening is absent cannot match). Loaded by needles.py through ctypes;
   the Python ``in`` of each needle is the same answer, one pass a needle.

   A table of 65,536 entries, one per pair of bytes, holds for each the first needle that begins with that
   pair (needles of one byte are not taken: the caller looks for them itself); needles beginning alike are
   chained. The table is made once per needle set (ledger_needles_table) and kept by the caller. */
#include <stddef.h>
#include <string.h>

#ifndef LEDGER_NEEDLES_KEY
#define LEDGER_NEEDLES_KEY "unbuilt"
#endif

#define MAX_NEEDLES 250

const char *ledger_needles_key(void) { return LEDGER_NEEDLES_KEY; }

/* table: 65536 bytes, one per pair of bytes: 1 + the index of the first needle beginning with it, 0 for none;
   next: count bytes, 1 + the index of the next needle beginning alike, 0 for none. Returns 0, or -1 for a
   set it cannot take (too many needles, one shorter than two bytes). */
int ledger_needles_table(const unsigned char *packed, const unsigned int *lens, int count, unsigned char *table,
                         unsigned char *next) {
    if (count < 0 || count > MAX_NEEDLES) return -1;
    memset(table, 0, 65536);
    size_t at = 0;
    for (int k = 0; k < count; k++) {
        if (lens[k] < 2) return -1;
        at += lens[k];
    }
    for (int k = count - 1; k >= 0; k--) { /* chained from the last: each chain in the needles' order */
        at -= lens[k];
        unsigned int pair = packed[at] | (unsigned int)packed[at + 1] << 8;
        next[k] = table[pair];
        table[pair] = (unsigned char)(k + 1);
    }
    return 0;
}

/* hits[k] = 1 for each needle k found in hay[0:n] (hits zeroed by the caller); returns how many were found. */
int ledger_needles_find(const unsigned char *hay, size_t n, const unsigned char *packed, const unsigned int *lens,
                        int count, const unsigned char *table, const unsigned char *next, unsigned char *hits) {
    size_t offsets[MAX_NEEDLES];
    size_t at = 0;
    if (count < 0 || count > MAX_NEEDLES) return -1;
    for (int k = 0; k < count; k++) {
        offsets[k] = at;
        at += lens[k];
    }
    int left = count, found = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned int k = table[hay[i] | (unsigned int)hay[i + 1] << 8];
        while (k) {
            unsigned int j = k - 1;
            if (!hits[j] && lens[j] <= n - i && memcmp(hay + i, packed + offsets[j], lens[j]) == 0) {
                hits[j] = 1;
                found++;
                if (--left == 0) return found;
            }
            k = next[j];
        }
    }
    return found;
}
