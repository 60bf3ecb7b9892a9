"""The wire contract: frames on TCP, the secret handshake, and the Arrow tuple batch."""
