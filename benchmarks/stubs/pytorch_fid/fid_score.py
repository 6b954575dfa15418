"""Frechet distance between two Gaussians, written for the trial stand-in."""

import numpy as np
from scipy import linalg


def calculate_frechet_distance(mu1, sigma1, mu2, sigma2, eps=1e-6):
    diff = np.atleast_1d(mu1) - np.atleast_1d(mu2)
    covmean, _ = linalg.sqrtm(np.atleast_2d(sigma1).dot(np.atleast_2d(sigma2)), disp=False)
    covmean = np.real(covmean)
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))
