from temper.cli.entry import main

main()
