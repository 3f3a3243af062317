"""The gRPC proxy for RocketMQ 5.x clients (apache.rocketmq.v2, docs/proxy.md). So far: routes, heartbeats, the
settings handshake and sends of normal messages; consumption (POP) comes next."""
