"""Price and demand response: promotion events known before the sales, the model's and the
econometric baselines' predicted lifts against them, the simulation and elasticity checks, and
the empirical-Bayes response prior that initialises training. Nothing here reads the warehouse.
"""
