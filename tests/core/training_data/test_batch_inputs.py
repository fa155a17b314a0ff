def test_calendar_inputs_follow_the_source_calendar():
    import datetime as dt

    import numpy as np
    import polars as pl

    from retailsim_core.calendar import COMPLETE_JOURNEY, LGSR
    from retailsim_core.training_data.batch_inputs import calendar_inputs

    dates = pl.Series([dt.date(2017, 11, 23), dt.date(2017, 11, 24)])
    args = (dates, np.array([10, 11]), np.array([48, 48]), np.array([-1, 3]))
    us = calendar_inputs(*args, COMPLETE_JOURNEY)
    uk = calendar_inputs(*args, LGSR)
    assert us[:, 3].tolist() == [1.0, 0.0]  # Thanksgiving is a US holiday
    assert uk[:, 3].tolist() == [0.0, 0.0]
    assert us[0, 5] == np.float32(48 / 53) and uk[0, 5] == np.float32(48 / 117)
