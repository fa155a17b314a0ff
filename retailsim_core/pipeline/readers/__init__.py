"""What the model steps read from the warehouse and the truth folder, apart from the steps
that use it: shelf prices replayed from the observed cells, the service's inputs, the planted
truth bound to the ingested files."""
