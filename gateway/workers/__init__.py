"""``mcp-gateway serve --workers N``: N worker processes behind one supervisor.

* :mod:`.supervisor`: reserves the public port, starts and restarts the workers, forwards
  SIGTERM/SIGINT/SIGHUP, stops the group gracefully;
* :mod:`.worker`: a worker process (the whole gateway, public listener shared with
  ``SO_REUSEPORT``, ops listener on a private Unix socket);
* :mod:`.group_ops`: the group's ops listener (``/healthz``, ``/readyz``, ``/metrics``,
  ``POST /admin/revoke``) answered by asking every worker;
* :mod:`.slot`: restart back-off and when a worker "keeps dying";
* :mod:`.runtime`: the private runtime directory the supervisor shares with its workers.

Only :mod:`gateway.commands.serve` imports this package; ``--workers 1`` (the default) never
does anything here: one process, exactly as without the option.
"""
