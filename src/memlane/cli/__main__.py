from memlane.cli.app import main

main()
