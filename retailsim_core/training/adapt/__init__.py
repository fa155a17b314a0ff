"""After training: fine-tuning a model on new weeks (refresh) and calibrating its size head."""
