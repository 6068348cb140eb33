from kmeta.cli.main import main

main()
