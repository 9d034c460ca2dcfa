"""Federation: each party runs its own node (Flower's Deployment Runtime), the coordinator holds nothing private.

* :mod:`.party` — what runs at a party: its party file, its agents, nodes, own ledger, checkpoint and outputs;
* :mod:`.client_app` — the party's Flower ClientApp (needs ``pip install 'cvxdp[federation]'``);
* :mod:`.coordinator` — the coordinator: the one round loop over a :class:`Channel` to the parties;
* :mod:`.server_app` — the coordinator's Flower ServerApp;
* :mod:`.launch` — a SuperLink and one SuperNode per party on this machine's loopback, for trying it out;
* :mod:`.wire` — what crosses the wire, and reading it back safely.
"""
