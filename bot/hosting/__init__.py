"""Hosting the bot: the process ``countersign serve`` runs.

``server`` builds the deployment (Bolt app, dispatcher, scheduler, worker pool); Slack
reaches it over HTTP (``http``) or Socket Mode (``socket_mode``), both recording each
request in the inbox before acking it; ``pool`` runs the workers in a child process or in
threads; ``parent`` ties a child's life to its parent's. Nothing is imported here, so
``python -m bot`` can import ``parent`` before anything slow.
"""
