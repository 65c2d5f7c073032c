from decguard_pipeline.cli import main

main()
