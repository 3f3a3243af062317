"""POP consumption on the broker (docs/pop.md): leases with receipt handles, acks, redelivery, dead letters."""
