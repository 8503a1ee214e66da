"""The request pipeline of docs/architecture.md, steps 1-18: routes.py (step 1), cors.py,
endpoint.py (steps 2-14), request_record.py and traced.py (the request's record and trace),
answer.py, dispatch.py and batch_admission.py (steps 15-18: method -> route, one message or
a batch).

The top floor of ``gateway/http/``: stands on ``methods/``, ``subscriptions/`` and the modules
of ``gateway/http/`` itself.
"""
