from drydock.cli import main

main()
