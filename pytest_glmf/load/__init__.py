"""The load engine: streamed requests at N concurrent users (or an open-loop rate), read by lean
readers with kernel timestamps, in worker processes past what one core reads, into one typed
record per request, with the client's self-check of its own error."""
