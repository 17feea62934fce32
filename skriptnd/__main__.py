from skriptnd.cli import main

main()
