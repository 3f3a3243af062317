"""Transactional messages on the broker: records, the book of open transactions, and the service."""
