"""JSON, one way for every layer (imports nothing from the gateway): :mod:`.read` is the one
strict reader (client bodies, every peer's answer with its content type, files); :mod:`.write`
the compact and canonical encoders and the plain copy."""
