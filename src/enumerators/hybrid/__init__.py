"""The hybrid sources' enumerator: stages and the switch between them."""
