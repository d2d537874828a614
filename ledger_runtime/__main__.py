from ledger_runtime.entry import main

main()
