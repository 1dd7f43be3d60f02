"""The hub's side of the conversation.

:mod:`~bailing_flask.hub.client` calls the hub (business -> hub),
:mod:`~bailing_flask.hub.payloads` are typed views of what the hub POSTs
back, :mod:`~bailing_flask.hub.posts` builds those bodies the way the hub
does (for tests), :mod:`~bailing_flask.hub.tickets` signs visitor tickets
for the chat widget, and :mod:`~bailing_flask.hub.fake` is a stand-in for
the hub's HTTP surface in tests. Builds on :mod:`bailing_flask.wire` only.
"""
