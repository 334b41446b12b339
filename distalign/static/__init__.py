"""Static (type-level) word vectors: word2vec text I/O, X2Static extraction from a contextual
encoder (Gupta & Jaggi 2021, as used by Hämmerl et al. 2022), and orthogonal Procrustes alignment."""
