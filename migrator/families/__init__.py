"""Rule families, one package each; a rule (or a tight group of rules one matcher decides) is one module
named after its code. `migrator.registry` lists them in dispatch order."""
