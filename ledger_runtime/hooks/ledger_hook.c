/* The hook client and the command wrapper (client.py, wrapper.py), compiled: what an agent runs once per
 * hook event (``ledger-hook hook EVENT ...``) and once per shell command (``ledger-hook wrap ... --
 * COMMAND``), where an interpreter's start was most of the cost of each. compiled.py builds it at first
 * use into a private per-user cache with the system's C compiler, keyed by the digest of this file (the
 * build names it: ``ledger-hook --version`` prints it); without a compiler, or when the build fails, the
 * Python ones serve. It does what they do, line for line: the same arguments and usage lines, the same
 * calls on the run's socket, the same faults in faults.log (never a command, an output or an answer),
 * the same refusals, and a fault of ours never blocks the agent. tests/test_compiled_hooks.py runs both on
 * the same inputs and compares what they print, exit with and log.
 *
 * POSIX only (no pipe2, no SOCK_CLOEXEC, no MSG_NOSIGNAL: it builds where they are missing too); one
 * thread, so a descriptor made close-on-exec by fcntl right after it is opened is never inherited. */

#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef LEDGER_HOOK_KEY
#define LEDGER_HOOK_KEY "unkeyed"
#endif
#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif

#define DEFAULT_TIMEOUT_S 120.0
#define MAX_TOKEN_BYTES 256
#define DEFAULT_WAIT_S 8.0
#define MAX_OUTPUT (8u * 1024u * 1024u)
#define DRAIN_QUIET_S 0.02
#define DRAIN_MAX_S 0.1
#define POLL_S 0.05
#define FAULTS_FILE "faults.log"

static const char HOOK_USAGE[] =
    "usage: ledger-run hook EVENT [--socket PATH] [--run-dir DIR] [--token T | --token-file F] [--flag-on-fault FLAG]"
    "   (the event's JSON on stdin)";
static const char WRAP_USAGE[] =
    "usage: ledger-run wrap --socket PATH --call ID [--token T] [--run-dir DIR] [--wait SECONDS] "
    "[--shell PATH] [--login 0|1 | --login-status N] [--flag-on-fault FLAG] (--command-fd N | -- COMMAND)";
static const char *const SHELLS[] = {"bash", "sh", "dash", "zsh", "ksh", "mksh", NULL};
static const int FORWARDED[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};
#define N_FORWARDED ((int)(sizeof FORWARDED / sizeof FORWARDED[0]))

/* -- bytes -------------------------------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static int buf_add(buf_t *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *data = realloc(b->data, cap);
        if (data == NULL) return -1;
        b->data = data;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int buf_str(buf_t *b, const char *s) { return buf_add(b, s, strlen(s)); }

static int buf_fmt(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_fmt(buf_t *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof small) return buf_add(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (big == NULL) return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int r = buf_add(b, big, (size_t)n);
    free(big);
    return r;
}

static double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cloexec(int fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One code point of UTF-8 at s (n bytes left): its length, or 0 where the byte starts no valid sequence
 * (Python's decoder with surrogateescape then stands for that byte alone: U+DC80 + byte). */
static size_t utf8_char(const unsigned char *s, size_t n, unsigned long *cp) {
    unsigned char c = s[0];
    size_t len;
    unsigned long v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

/* The short escape JSON (``json``) or repr() writes for a control character; NULL where there is none. */
static const char *short_escape(unsigned long cp, int json) {
    switch (cp) {
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
        case '\b':
            return json ? "\\b" : NULL;
        case '\f':
            return json ? "\\f" : NULL;
        default:
            return NULL;
    }
}

/* ``s`` as a JSON string, as Python's json.dumps writes it (ASCII only: \uXXXX for the rest). */
static int json_string(buf_t *b, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    if (buf_str(b, "\"")) return -1;
    for (size_t i = 0; i < n;) {
        unsigned long cp;
        size_t len = utf8_char(s + i, n - i, &cp);
        char esc[32];
        if (len == 0) {
            cp = 0xDC00 + s[i];
            len = 1;
        }
        i += len;
        const char *short_form = short_escape(cp, 1);
        if (cp == '"' || cp == '\\') {
            esc[0] = '\\', esc[1] = (char)cp, esc[2] = '\0';
        } else if (short_form != NULL) {
            strcpy(esc, short_form);
        } else if (cp >= 0x10000) {
            unsigned long v = cp - 0x10000;
            snprintf(esc, sizeof esc, "\\u%04lx\\u%04lx", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        } else if (cp < 0x20 || cp > 0x7E) {
            snprintf(esc, sizeof esc, "\\u%04lx", cp);
        } else {
            esc[0] = (char)cp, esc[1] = '\0';
        }
        if (buf_str(b, esc)) return -1;
    }
    return buf_str(b, "\"");
}

/* Python's repr() of a str, for what the messages quote (a call id, an event name), the first ``limit``
 * characters of it; ``NULL`` is None. Non-ASCII text is kept as it is (as repr keeps printable text). */
static int py_repr(buf_t *b, const char *str, size_t limit) {
    if (str == NULL) return buf_str(b, "None");
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), count = 0, end = 0;
    while (end < n && count < limit) {
        unsigned long cp;
        size_t len = utf8_char(s + end, n - end, &cp);
        end += len ? len : 1;
        count++;
    }
    int single = memchr(str, '\'', end) != NULL && memchr(str, '"', end) == NULL ? 0 : 1;
    char quote = single ? '\'' : '"';
    if (buf_add(b, &quote, 1)) return -1;
    for (size_t i = 0; i < end;) {
        unsigned long cp;
        size_t len = utf8_char(s + i, end - i, &cp);
        char esc[32];
        if (len == 0) {
            snprintf(esc, sizeof esc, "\\udc%02x", s[i]);
            i += 1;
            if (buf_str(b, esc)) return -1;
            continue;
        }
        const char *short_form = short_escape(cp, 0);
        if (cp == '\\' || (char)cp == quote) {
            esc[0] = '\\', esc[1] = (char)cp, esc[2] = '\0';
        } else if (short_form != NULL) {
            strcpy(esc, short_form);
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
            snprintf(esc, sizeof esc, "\\x%02lx", cp);
        } else {
            if (buf_add(b, s + i, len)) return -1;
            i += len;
            continue;
        }
        i += len;
        if (buf_str(b, esc)) return -1;
    }
    return buf_add(b, &quote, 1);
}

/* An OSError's text as Python words it. */
static void os_error(buf_t *msg, int err) {
    if (err == EAGAIN || err == EWOULDBLOCK) {
        buf_str(msg, "timed out"); /* a socket's timeout (SO_RCVTIMEO, SO_SNDTIMEO) */
        return;
    }
    buf_fmt(msg, "[Errno %d] %s", err, strerror(err));
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* ``p`` without the whitespace at both ends (Python's bytes.strip / str.strip for ASCII). */
static void strip(const char **p, size_t *n) {
    while (*n && is_space((unsigned char)(*p)[0])) (*p)++, (*n)--;
    while (*n && is_space((unsigned char)(*p)[*n - 1])) (*n)--;
}

/* -- what client.py does ------------------------------------------------------------------------------- */

/* An event name the header can carry as it is: letters, digits, underscores (client.event_name). */
static int event_name(const char *s) {
    if (s == NULL || *s == '\0') return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return 0;
    }
    return 1;
}

static int call_id(const char *s) {
    if (s == NULL || *s == '\0') return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return 0;
    }
    return 1;
}

static int is_dir(const char *path) {
    struct stat st;
    return path && *path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* One JSON line in the run's faults.log, never through a link, never into another user's file, a FIFO or
 * a device (stderr when there is no run directory to write to; ``quiet``: nothing then, for the wrapper,
 * whose stderr is the command's output). A message names a call, a size, a path of ours: nothing here
 * masks secrets. */
static void log_fault(const char *run_dir, const char *event, const char *message, int quiet) {
    if (is_dir(run_dir)) {
        buf_t path = {0}, line = {0};
        int ok = 0;
        buf_fmt(&path, "%s/%s", run_dir, FAULTS_FILE);
        buf_fmt(&line, "{\"at\": %.6f, \"where\": ", wall_time());
        buf_t where = {0};
        buf_str(&where, "hook ");
        buf_str(&where, event && *event ? event : "?");
        json_string(&line, where.data ? where.data : "hook ?");
        buf_str(&line, ", \"error\": ");
        json_string(&line, message);
        buf_str(&line, ", \"command\": null}\n");
        free(where.data);
        int fd = path.data ? open(path.data, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600)
                           : -1;
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && fchmod(fd, 0600) == 0 &&
                line.data && write_all(fd, line.data, line.len) == 0)
                ok = 1;
            close(fd);
        }
        free(path.data);
        free(line.data);
        if (ok) return;
    }
    if (!quiet) fprintf(stderr, "ledger-run hook: %s (the command runs without the ledger)\n", message);
}

/* Set the server's flag at ``path`` (an empty file in its private directory, never through a link): a
 * hook that did not reach the server says so to the hooks that follow. */
static void raise_flag(const char *path) {
    if (path == NULL || *path == '\0') return;
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd < 0) return;
    futimens(fd, NULL); /* when it was set last: the server keeps it a while */
    close(fd);
}

/* The run's secret from ``path`` (--token-file): this user's regular file, nobody else's to read, never
 * through a link; NULL otherwise (the server then refuses the call and the agent goes on). */
static char *read_token(const char *path) {
    if (path == NULL || *path == '\0') return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return NULL;
    cloexec(fd);
    struct stat st;
    char data[MAX_TOKEN_BYTES + 1];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077)) {
        do n = read(fd, data, sizeof data);
        while (n < 0 && errno == EINTR);
    }
    close(fd);
    if (n <= 0 || n > MAX_TOKEN_BYTES) return NULL;
    const char *p = data;
    size_t len = (size_t)n;
    strip(&p, &len);
    if (len == 0) return NULL;
    char *token = malloc(len + 1);
    if (token == NULL) return NULL;
    memcpy(token, p, len);
    token[len] = '\0';
    return token;
}

enum { ASKED = 0, OS_ERROR = -1, VALUE_ERROR = -2 };

/* Send one event to the hook server and read its answer (empty for none): client.ask. ``token``: the
 * run's (or the call's) secret, ``call``: the tool call it speaks for, both in the first line, which the
 * server checks before it reads the rest; ``raw``: the payload is a JSON object's line, then bytes.
 * ASKED, or OS_ERROR / VALUE_ERROR with ``msg`` saying why. */
static int ask(const char *sock_path, const char *event, const char *head, size_t head_len, const char *body,
               size_t body_len, double timeout, const char *token, const char *call, int raw, buf_t *answer,
               buf_t *msg) {
    if (!event_name(event)) {
        buf_str(msg, "not an event name: ");
        py_repr(msg, event, 40);
        return VALUE_ERROR;
    }
    if (token != NULL && !event_name(token)) {
        buf_str(msg, "a token is letters and digits");
        return VALUE_ERROR;
    }
    if (call != NULL && !call_id(call)) {
        buf_str(msg, "not a tool call id: ");
        py_repr(msg, call, 40);
        return VALUE_ERROR;
    }
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(sock_path) >= sizeof addr.sun_path) {
        buf_str(msg, "AF_UNIX path too long");
        return OS_ERROR;
    }
    strcpy(addr.sun_path, sock_path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) {
        os_error(msg, errno);
        return OS_ERROR;
    }
    cloexec(s);
    struct timeval tv;
    tv.tv_sec = (time_t)timeout;
    tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
    /* a full queue of new connections: connect waits its turn, up to the timeout (a flood must not fail a hook) */
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int rc;
    do rc = connect(s, (struct sockaddr *)&addr, sizeof addr);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int e = errno;
        close(s);
        if (e == EAGAIN) { /* the queue stayed full until the deadline: as Python's BlockingIOError says */
            buf_fmt(msg, "[Errno %d] %s", e, strerror(e));
            return OS_ERROR;
        }
        os_error(msg, e);
        return OS_ERROR;
    }
    buf_t first = {0};
    buf_str(&first, "{\"event\": \"");
    buf_str(&first, event);
    buf_str(&first, "\"");
    if (token != NULL && *token) buf_fmt(&first, ", \"token\": \"%s\"", token);
    if (call != NULL) buf_fmt(&first, ", \"call\": \"%s\"", call);
    if (raw) buf_str(&first, ", \"raw\": true");
    buf_str(&first, "}\n");
    if (first.data == NULL) {
        close(s);
        buf_str(msg, "out of memory");
        return OS_ERROR;
    }
    struct iovec iov[3] = {
        {first.data, first.len}, {(void *)head, head_len}, {(void *)body, body_len}};
    int at = 0;
    while (at < 3) {
        if (iov[at].iov_len == 0) {
            at++;
            continue;
        }
        ssize_t w = writev(s, iov + at, 3 - at);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(first.data);
            close(s);
            os_error(msg, e);
            return OS_ERROR;
        }
        size_t left = (size_t)w;
        while (at < 3 && left >= iov[at].iov_len) left -= iov[at++].iov_len;
        if (at < 3) {
            iov[at].iov_base = (char *)iov[at].iov_base + left;
            iov[at].iov_len -= left;
        }
    }
    free(first.data);
    shutdown(s, SHUT_WR);
    char chunk[65536];
    for (;;) {
        ssize_t n = recv(s, chunk, sizeof chunk, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(s);
            os_error(msg, e);
            return OS_ERROR;
        }
        if (n == 0) break;
        if (buf_add(answer, chunk, (size_t)n)) {
            close(s);
            buf_str(msg, "out of memory");
            return OS_ERROR;
        }
    }
    close(s);
    return ASKED;
}

static double hook_timeout(void) {
    const char *v = getenv("LEDGER_HOOK_TIMEOUT");
    if (v == NULL || *v == '\0') return DEFAULT_TIMEOUT_S;
    char *end;
    double t = strtod(v, &end);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end == v || *end || !(t > 0 && t < 86400)) return DEFAULT_TIMEOUT_S; /* negative, zero, nan, absurd */
    return t;
}

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

/* ``hook EVENT [--socket PATH] [--run-dir DIR] [--token T | --token-file F] [--flag-on-fault FLAG]``:
 * client.main. */
static int hook_main(int argc, char **argv) {
    static const char *const options[] = {"--socket", "--run-dir", "--token", "--token-file", "--flag-on-fault", NULL};
    const char *values[5] = {NULL, NULL, NULL, NULL, NULL};
    const char *event = NULL;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n", HOOK_USAGE);
            return 0;
        }
    for (int i = 0; i < argc;) {
        int o = 0;
        while (options[o] && strcmp(argv[i], options[o])) o++;
        if (options[o] && i + 1 < argc) {
            values[o] = argv[i + 1];
            i += 2;
            continue;
        }
        if (event == NULL && argv[i][0] != '-') event = argv[i];
        i++;
    }
    const char *sock_path = nonempty(values[0]) ? values[0] : nonempty(getenv("LEDGER_HOOK_SOCKET"));
    const char *run_dir = nonempty(values[1]) ? values[1] : nonempty(getenv("LEDGER_RUN_DIR"));
    char *token = nonempty(values[2]) ? strdup(values[2]) : read_token(values[3]);
    const char *flag = values[4];
    buf_t payload = {0}, msg = {0}, answer = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            buf_str(&msg, "cannot read the event from stdin: ");
            os_error(&msg, errno);
            log_fault(run_dir, event, msg.data, 0);
            return 0;
        }
        if (n == 0) break;
        if (buf_add(&payload, chunk, (size_t)n)) {
            log_fault(run_dir, event, "cannot read the event from stdin: out of memory", 0);
            return 0;
        }
    }
    if (event == NULL || *event == '\0') {
        buf_fmt(&msg, "no EVENT given: %s", HOOK_USAGE);
        log_fault(run_dir, event, msg.data, 0);
        return 0;
    }
    if (!event_name(event)) {
        buf_str(&msg, "EVENT must be a hook event's name, not ");
        py_repr(&msg, event, 40);
        buf_fmt(&msg, ": %s", HOOK_USAGE);
        log_fault(run_dir, event, msg.data, 0);
        return 0;
    }
    if (sock_path == NULL) {
        log_fault(run_dir, event, "no hook server: pass --socket or set LEDGER_HOOK_SOCKET (ledger-run codex does)", 0);
        return 0;
    }
    buf_t why = {0};
    int asked = ask(sock_path, event, payload.data ? payload.data : "", payload.len, "", 0, hook_timeout(), token,
                    NULL, 0, &answer, &why);
    if (asked != ASKED) {
        raise_flag(flag);
        buf_fmt(&msg, "hook server %s %s: %s", sock_path, asked == OS_ERROR ? "did not answer" : "was not asked",
                why.data ? why.data : "");
        log_fault(run_dir, event, msg.data, 0);
        return 0;
    }
    const char *text = answer.data ? answer.data : "";
    size_t len = answer.len;
    /* the server answers with one line of JSON (a dict's, which has no newline in it, then a newline):
     * without that newline the answer was cut short and is not passed on */
    int whole = len > 0 && text[len - 1] == '\n';
    strip(&text, &len);
    if (len == 0) return 0;
    if (!whole) {
        raise_flag(flag);
        buf_fmt(&msg, "hook server's answer was cut short (no end of line after %zu bytes)", len);
        log_fault(run_dir, event, msg.data, 0);
        return 0;
    }
    if (!(text[0] == '{' && text[len - 1] == '}')) {
        buf_fmt(&msg, "hook server answered %zu bytes that are not a JSON object", len);
        log_fault(run_dir, event, msg.data, 0);
        return 0;
    }
    write_all(1, text, len); /* a reader gone: nothing more can be said */
    write_all(1, "\n", 1);
    return 0;
}

/* -- what wrapper.py does ------------------------------------------------------------------------------ */

typedef struct {
    const char *socket, *call, *run_dir, *wait, *token, *shell, *login, *login_status, *command_fd, *flag;
    const char *command; /* after "--" */
    char *joined;        /* what "-- A B" made of its arguments */
} wrap_args;

static int wrap_parse(int argc, char **argv, wrap_args *a) {
    static const char *const options[] = {"--socket", "--call",  "--run-dir",      "--wait",       "--token",
                                          "--shell",  "--login", "--login-status", "--command-fd", "--flag-on-fault",
                                          NULL};
    const char **slots[] = {&a->socket, &a->call,  &a->run_dir,      &a->wait,       &a->token,
                            &a->shell,  &a->login, &a->login_status, &a->command_fd, &a->flag};
    for (int i = 0; i < argc;) {
        if (!strcmp(argv[i], "--")) {
            if (argc - i > 2) {
                buf_t joined = {0};
                for (int j = i + 1; j < argc; j++) {
                    if (j > i + 1) buf_str(&joined, " ");
                    buf_str(&joined, argv[j]);
                }
                a->joined = joined.data;
                a->command = joined.data ? joined.data : "";
            } else {
                a->command = i + 1 < argc ? argv[i + 1] : "";
            }
            return 0;
        }
        int o = 0;
        while (options[o] && strcmp(argv[i], options[o])) o++;
        if (options[o] && i + 1 < argc) {
            *slots[o] = argv[i + 1];
            i += 2;
            continue;
        }
        return -1;
    }
    return a->command_fd ? 0 : -1;
}

/* The command from the here-document on file descriptor ``fd_text`` (closed then, so the command never
 * inherits it); a here-document ends with one newline of its own. */
static int command_from(const char *fd_text, buf_t *out) {
    char *end;
    errno = 0;
    long fd = strtol(fd_text, &end, 10);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end == fd_text || *end || errno || fd < 0 || fd > 1 << 30) return -1;
    char chunk[65536];
    for (;;) {
        ssize_t n = read((int)fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) break;
        if (buf_add(out, chunk, (size_t)n)) return -1;
    }
    if (close((int)fd) < 0 && errno != EINTR) return -1;
    if (buf_add(out, "", 0)) return -1;
    if (out->len && out->data[out->len - 1] == '\n') out->data[--out->len] = '\0';
    return 0;
}

static const char *basename_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int known_shell(const char *path) {
    const char *name = basename_of(path);
    for (int i = 0; SHELLS[i]; i++)
        if (!strcmp(name, SHELLS[i])) return 1;
    return 0;
}

static int executable_file(const char *path) {
    struct stat st;
    return access(path, X_OK) == 0 && !(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* ``name`` on PATH (wrapper._which); a new string, or NULL. */
static char *which(const char *name) {
    const char *path = nonempty(getenv("PATH")) ? getenv("PATH") : "/bin:/usr/bin";
    for (const char *d = path;; d++) {
        const char *colon = strchr(d, ':');
        size_t dl = colon ? (size_t)(colon - d) : strlen(d);
        buf_t c = {0};
        if (dl == 0) {
            buf_str(&c, ".");
        } else {
            buf_add(&c, d, dl);
            while (c.len && c.data[c.len - 1] == '/') c.data[--c.len] = '\0';
        }
        buf_fmt(&c, "/%s", name);
        if (c.data && executable_file(c.data)) return c.data;
        free(c.data);
        if (colon == NULL) return NULL;
        d = colon;
    }
}

/* The shell to run the command with: the one Codex ran this wrapper with ("$0"), when it is a shell
 * whose -c we know; else $SHELL, else bash where there is one (wrapper.shell). */
static char *pick_shell(const char *given) {
    const char *candidates[] = {given, getenv("SHELL"), "bash", "/bin/sh"};
    for (int i = 0; i < 4; i++) {
        const char *c = candidates[i];
        if (c == NULL || *c == '\0') continue;
        char *found = c[0] == '/' ? strdup(c) : which(c);
        if (found && known_shell(found) && access(found, X_OK) == 0) return found;
        free(found);
    }
    return strdup("/bin/sh");
}

static volatile sig_atomic_t forward_to = 0; /* the shell's pid while it runs: the signals go to it */
static struct sigaction previous[N_FORWARDED];
static int handled[N_FORWARDED];

static void forward(int signum) {
    pid_t pid = (pid_t)forward_to;
    if (pid > 0) kill(pid, signum);
}

static void restore_signals(void) {
    forward_to = 0;
    for (int i = 0; i < N_FORWARDED; i++)
        if (handled[i]) {
            sigaction(FORWARDED[i], &previous[i], NULL);
            handled[i] = 0;
        }
}

/* Start the shell with its stdout and stderr on one pipe whose read end is ``*fd``; SIGPIPE and SIGXFSZ
 * back to their defaults (this process ignores both), every other signal as this process got it, and
 * the signal mask ``mask`` (this process's as it started). Its pid, or -1 with errno set (an exec that
 * failed says its errno through a close-on-exec pipe). */
static pid_t start_shell(char *const argv[], int *fd, const sigset_t *mask) {
    int out[2], err[2];
    if (pipe(out) < 0) return -1;
    cloexec(out[0]);
    cloexec(out[1]);
    if (pipe(err) < 0) {
        int e = errno;
        close(out[0]);
        close(out[1]);
        errno = e;
        return -1;
    }
    cloexec(err[0]);
    cloexec(err[1]);
    pid_t pid = fork();
    if (pid == 0) {
        int w = out[1];
        if (w == 1 || w == 2) { /* the pipe took a standard descriptor: keep it open across exec */
            int flags = fcntl(w, F_GETFD);
            fcntl(w, F_SETFD, flags & ~FD_CLOEXEC);
        }
        if ((w == 1 || dup2(w, 1) >= 0) && (w == 2 || dup2(w, 2) >= 0)) {
            signal(SIGPIPE, SIG_DFL);
            signal(SIGXFSZ, SIG_DFL);
            for (int i = 0; i < N_FORWARDED; i++) /* the forwarding is this process's, not the shell's */
                if (handled[i]) signal(FORWARDED[i], SIG_DFL);
            sigprocmask(SIG_SETMASK, mask, NULL);
            execv(argv[0], argv);
        }
        int e = errno;
        if (write(err[1], &e, sizeof e) < 0) _exit(127);
        _exit(127);
    }
    int e = errno;
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        errno = e;
        return -1;
    }
    int child_errno = 0;
    ssize_t n;
    do n = read(err[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(err[0]);
    if (n == (ssize_t)sizeof child_errno) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        close(out[0]);
        errno = child_errno;
        return -1;
    }
    *fd = out[0];
    return pid;
}

static int exit_code(int status) {
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status) & 0xFF;
}

/* Trade the call's secret (on the command line, readable by the command) for a key only this process
 * holds, before the command starts: its secret is spent then. 0 with ``key`` set, -1 when the server took
 * no key (the raw output is printed then). */
static int begin(const wrap_args *a, char key[33]) {
    if (!nonempty(a->socket)) return -1; /* said when the answer is asked for */
    buf_t msg = {0}, answer = {0}, why = {0}, body = {0};
    unsigned char random[16];
    const char *call = a->call ? a->call : "";
    int fd = open("/dev/urandom", O_RDONLY | O_NOCTTY);
    ssize_t n = -1;
    if (fd >= 0) {
        do n = read(fd, random, sizeof random);
        while (n < 0 && errno == EINTR);
        close(fd);
    }
    int asked;
    if (n != (ssize_t)sizeof random) {
        buf_str(&why, "no random bytes for a key");
        asked = OS_ERROR;
    } else {
        for (int i = 0; i < 16; i++) snprintf(key + 2 * i, 3, "%02x", random[i]);
        buf_fmt(&body, "{\"tool_use_id\": \"%s\", \"key\": \"%s\"}", call, key);
        asked = ask(a->socket, "Begin", body.data, body.len, "", 0, DEFAULT_TIMEOUT_S, a->token,
                    *call ? call : NULL, 0, &answer, &why);
        if (asked == ASKED) {
            const char *text = answer.data ? answer.data : "";
            size_t len = answer.len;
            strip(&text, &len);
            if (!(len == 12 && !memcmp(text, "{\"ok\": true}", 12))) {
                buf_fmt(&why, "the call was not taken (%zu bytes of answer)", answer.len);
                asked = VALUE_ERROR;
            }
        }
    }
    free(body.data);
    free(answer.data);
    if (asked == ASKED) {
        free(why.data);
        return 0;
    }
    raise_flag(a->flag); /* the command is not recorded here: its PostToolUse records it */
    buf_fmt(&msg, "hook server %s gave no key for call ", a->socket);
    py_repr(&msg, call, (size_t)-1);
    buf_fmt(&msg, ": %s", why.data ? why.data : "");
    log_fault(a->run_dir, "Begin", msg.data, 1);
    free(msg.data);
    free(why.data);
    return -1;
}

/* The server's answer text for the command's output (``*text``): 0; -1 (print the raw output) on any
 * fault, which is logged. */
static int fetch_answer(const wrap_args *a, const char *key, const buf_t *head, const buf_t *output, buf_t *text,
                        const char **start, size_t *len) {
    buf_t msg = {0}, why = {0};
    if (!nonempty(a->socket)) {
        buf_str(&msg, "no hook server socket given for call ");
        py_repr(&msg, a->call, (size_t)-1);
        log_fault(a->run_dir, "Answer", msg.data, 1);
        free(msg.data);
        return -1;
    }
    if (key == NULL) return -1; /* the call was not taken (said then): the output goes as it is */
    int asked = ask(a->socket, "Answer", head->data, head->len, output->data ? output->data : "", output->len,
                    DEFAULT_TIMEOUT_S, key, a->call, 1, text, &why);
    if (asked == ASKED) {
        if (text->len == 0) return -1; /* the server kept the output as it is (or had nothing to say) */
        char *nl = memchr(text->data, '\n', text->len);
        size_t digits = nl ? (size_t)(nl - text->data) : 0;
        int whole = nl != NULL && digits > 0 && digits <= 18;
        unsigned long long size = 0;
        for (size_t i = 0; whole && i < digits; i++) {
            if (text->data[i] < '0' || text->data[i] > '9') whole = 0;
            size = size * 10 + (unsigned long long)(text->data[i] - '0');
        }
        if (whole && size == text->len - digits - 1) {
            *start = nl + 1;
            *len = (size_t)size;
            return 0;
        }
        buf_fmt(&why, "no whole answer text in its %zu bytes", text->len);
    }
    buf_fmt(&msg, "hook server %s gave no answer for call ", a->socket);
    py_repr(&msg, a->call, (size_t)-1);
    buf_fmt(&msg, ": %s", why.data ? why.data : "");
    log_fault(a->run_dir, "Answer", msg.data, 1);
    free(msg.data);
    free(why.data);
    return -1;
}

static int child_exited(pid_t pid, int *status) {
    pid_t got;
    do got = waitpid(pid, status, WNOHANG);
    while (got < 0 && errno == EINTR);
    return got == pid;
}

/* Collect the shell's output until it exits (what its background jobs still print is read until they are
 * quiet, DRAIN_QUIET_S, at most DRAIN_MAX_S); past ``wait`` seconds, or MAX_OUTPUT bytes, the output so far
 * goes out and the rest as it comes (``*passthrough``). The shell's wait status. */
static int collect(pid_t pid, int fd, double wait, buf_t *out, int *passthrough, int *lost) {
    double deadline = monotonic() + wait, exited_at = -1, quiet_since = 0;
    int status = 0, have_status = 0;
    char chunk[65536];
    for (;;) {
        double now = monotonic();
        if (!*passthrough && (deadline - now <= 0 || out->len > MAX_OUTPUT)) {
            *passthrough = 1; /* still running, or too much: the output so far, then the rest as it comes */
            write_all(1, out->data ? out->data : "", out->len);
        }
        if (exited_at < 0 && child_exited(pid, &status)) {
            have_status = 1;
            restore_signals();
            exited_at = quiet_since = now;
        }
        if (exited_at >= 0 && (now - quiet_since >= DRAIN_QUIET_S || now - exited_at >= DRAIN_MAX_S))
            break; /* a background job holds the pipe: Codex's own result would not wait for it either */
        /* a look at the shell every POLL_S: the pipe's end does not say it exited while a job holds it */
        double left = deadline - now < 0.01 ? 0.01 : deadline - now;
        double timeout = *passthrough || exited_at >= 0 || left > POLL_S ? POLL_S : left;
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, (int)(timeout * 1000 + 0.999));
        if (ready <= 0) continue;
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        quiet_since = monotonic();
        if (*passthrough) {
            write_all(1, chunk, (size_t)n);
            if (out->len <= MAX_OUTPUT && !*lost && buf_add(out, chunk, (size_t)n)) *lost = 1;
        } else if (buf_add(out, chunk, (size_t)n)) {
            *passthrough = *lost = 1; /* no memory for more: what came goes out, the rest as it comes */
            write_all(1, out->data ? out->data : "", out->len);
            write_all(1, chunk, (size_t)n);
        }
    }
    close(fd);
    while (!have_status) {
        if (waitpid(pid, &status, 0) == pid) {
            have_status = 1;
        } else if (errno != EINTR) {
            status = 0;
            break;
        }
    }
    restore_signals();
    return status;
}

/* ``wrap --socket PATH --call ID [...] (--command-fd N | -- COMMAND)``: wrapper.main. */
static int wrap_main(int argc, char **argv) {
    wrap_args a;
    memset(&a, 0, sizeof a);
    buf_t from_fd = {0};
    int parsed = wrap_parse(argc, argv, &a);
    if (parsed == 0 && a.command == NULL && a.command_fd != NULL && command_from(a.command_fd, &from_fd) == 0)
        a.command = from_fd.data ? from_fd.data : "";
    if (parsed != 0 || a.command == NULL) {
        fprintf(stderr, "%s\n", WRAP_USAGE);
        return 2;
    }
    size_t command_len = a.command == from_fd.data ? from_fd.len : strlen(a.command);
    double wait = DEFAULT_WAIT_S;
    if (nonempty(a.wait)) {
        char *end;
        double w = strtod(a.wait, &end);
        while (*end && is_space((unsigned char)*end)) end++;
        if (end != a.wait && *end == '\0' && w == w) wait = w; /* not nan */
    }
    double started = monotonic();
    char key_text[33] = {0};
    const char *key = begin(&a, key_text) == 0 ? key_text : NULL;
    const char *login = a.login;
    if (a.login_status) login = strcmp(a.login_status, "0") ? "0" : "1"; /* the test's status: 0 for a login shell */
    char *sh = pick_shell(a.shell);
    const char *name = basename_of(sh);
    char *shell_argv[5];
    int k = 0;
    shell_argv[k++] = sh;
    if (login && !strcmp(login, "0")) {
        shell_argv[k++] = "-c";
    } else if (!strcmp(name, "bash")) { /* a login shell again, without reading the profile twice */
        shell_argv[k++] = "--noprofile";
        shell_argv[k++] = "-lc";
    } else if (!strcmp(name, "zsh")) {
        shell_argv[k++] = "-f";
        shell_argv[k++] = "-lc";
    } else {
        shell_argv[k++] = "-c";
    }
    shell_argv[k++] = (char *)a.command;
    shell_argv[k] = NULL;
    if (memchr(a.command, '\0', command_len)) { /* as Python refuses an argument with a NUL in it */
        fprintf(stderr, "%s: embedded null byte\n", sh);
        return 127;
    }
    /* a signal this process was started with ignored (nohup) stays ignored for the command, as a shell
     * would inherit it; the others a terminal or Codex sends go to the command while it runs, and once
     * it has exited act on this process as they would have (a SIGTERM then ends it). They are held from
     * before the shell starts until they can be passed on: one sent as soon as the shell has set its
     * trap finds the forwarding in place, never this process at its default (which would end it). */
    sigset_t held, before;
    sigemptyset(&held);
    for (int i = 0; i < N_FORWARDED; i++) {
        struct sigaction now;
        if (sigaction(FORWARDED[i], NULL, &now) == 0 && now.sa_handler != SIG_IGN) sigaddset(&held, FORWARDED[i]);
    }
    sigprocmask(SIG_BLOCK, &held, &before);
    for (int i = 0; i < N_FORWARDED; i++) {
        struct sigaction sa;
        if (!sigismember(&held, FORWARDED[i])) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = forward;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(FORWARDED[i], &sa, &previous[i]) == 0) handled[i] = 1;
    }
    int fd = -1;
    pid_t pid = start_shell(shell_argv, &fd, &before);
    int started_errno = errno;
    if (pid > 0) forward_to = pid;
    else restore_signals();
    sigprocmask(SIG_SETMASK, &before, NULL); /* what came meanwhile goes to the shell now */
    if (pid < 0) {
        fprintf(stderr, "%s: [Errno %d] %s\n", sh, started_errno, strerror(started_errno));
        return 127;
    }
    int passthrough = 0, lost = 0;
    buf_t out = {0};
    int rc = exit_code(collect(pid, fd, wait, &out, &passthrough, &lost));
    int complete = out.len <= MAX_OUTPUT && !lost;
    buf_t head = {0}, text = {0};
    /* the call's facts on one line, then the output as it came (server.py: raw) */
    buf_fmt(&head, "{\"tool_use_id\": \"%s\", \"exit_code\": %d, \"complete\": %s, \"shown_raw\": %s, \"elapsed_s\": %.6f}\n",
            a.call ? a.call : "", rc, complete ? "true" : "false", passthrough ? "true" : "false",
            monotonic() - started);
    const char *answer = NULL;
    size_t answer_len = 0;
    int got = head.data ? fetch_answer(&a, key, &head, &out, &text, &answer, &answer_len) : -1;
    if (got != 0 && key != NULL) raise_flag(a.flag); /* the server took the call, and gave no answer for it */
    if (!passthrough) {
        if (got == 0)
            write_all(1, answer, answer_len);
        else
            write_all(1, out.data ? out.data : "", out.len);
    }
    return rc;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a reader or a server gone is an error to handle, not the end */
    signal(SIGXFSZ, SIG_IGN); /* so is a file past ``ulimit -f`` (faults.log): Python's client ignores it too */
    if (argc >= 2 && !strcmp(argv[1], "hook")) return hook_main(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "wrap")) return wrap_main(argc - 2, argv + 2);
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("%s\n", LEDGER_HOOK_KEY);
        return 0;
    }
    fprintf(stderr, "usage: ledger-hook hook EVENT ... | ledger-hook wrap ... -- COMMAND\n");
    return 2;
}
