"""The only layer that touches sockets: broker connections, the node map, cluster metadata."""
