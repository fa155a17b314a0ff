"""The evaluation's conductor: ``protocol`` runs the next-basket rooms (``next_basket``), the
price and demand response checks (``response``) and writes the report (``report``), on values
``retailsim_core.pipeline.evaluation_run`` read; it reads nothing itself."""
