"""taco.train: TP training with compression in the loop (python -m taco.train; see cli.py),
the models it trains (model.py) and its byte-level text data (data.py)."""
