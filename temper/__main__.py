from temper.cli.main import main

main()
