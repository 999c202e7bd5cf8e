"""How a client's bytes reach the client port besides plain TCP: TLS (`tls.py`) and WebSocket (`websocket.py`)."""
