"""The Mamba sequence blocks and their selective scan: a pure-torch reference and the fast
scans tested against it (chunked, compiled CPU kernel)."""
