"""The files connector's enumerator: listings, event-time order, its state."""
