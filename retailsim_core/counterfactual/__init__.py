"""What a trained world model answers: simulated baskets, autograd price elasticities and the
Gymnasium pricing environment over them."""
