"""nats-server's configuration format: the syntax (parser.py) and what a jetraft node takes from it (settings.py)."""
