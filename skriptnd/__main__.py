from skriptnd.cli.app import main

main()
