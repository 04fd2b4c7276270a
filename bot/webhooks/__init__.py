"""Webhooks: each crew's events POSTed, signed, to the URLs its configuration lists, at least
once. ``body`` makes the JSON and its signature, ``sender`` delivers (``countersign serve``
runs it beside the Slack dispatcher, on a table and a loop of its own)."""
