"""The dashboard (``tierra serve``): the topology as a picture, every gang's place, and
why each pending gang waits, over a snapshot or a live cluster.

``store`` keeps the objects, ``view`` the roll-ups drawn from them, ``gangs`` where gangs
run and why they wait, ``model`` ties them to a version; ``app`` is the HTTP side (the
page and its JSON API), ``server`` runs it with uvicorn, ``live`` feeds a store from a
cluster's informers. The page itself is plain JavaScript in ``static/``.
"""
