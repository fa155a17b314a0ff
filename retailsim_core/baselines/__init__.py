"""The baselines every method is compared with: counting (G/P/GP-TopFreq, co-purchase),
neighbourhood (TIFU-KNN, UP-CF@r) and sequential (SASRec, BERT4Rec) recommenders."""
