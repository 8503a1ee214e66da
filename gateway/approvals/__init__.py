"""Human approval of one exact call (issue 46, docs/policy.md#approvals): the records' content
(records.py: the binding's digest, the redacted preview), the desk the front door asks
(desk.py: the :class:`~gateway.seams.Approvals` seam on the shared store), the approval page and
the approvers' list on the login surface (approval_pages.py), the webhook (webhook.py)."""
