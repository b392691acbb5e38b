"""The course: lessons as data (curriculum), the claims their texts make, the H200 recordings and
ground truth they cite, the graded challenges, and the learner's progress through them."""
