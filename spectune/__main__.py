from spectune.cli.main import main

main()
