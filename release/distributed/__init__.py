"""Beyond one machine: TVM RPC helpers and Ray-based multi-task tuning."""
