"""Wire requests into what the services take (``AskRequest``, render options), validated on the way."""
