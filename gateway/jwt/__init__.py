"""Operator mode: NATS JWTs decoded (`decode`), read as nats-server reads them (`claims`), and a client's
user JWT let in or refused (`authenticator`)."""
