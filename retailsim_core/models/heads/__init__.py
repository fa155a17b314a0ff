"""What a slot's state becomes: the product mixture heads and the basket-size head."""
