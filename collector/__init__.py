"""ldptel collector: the Flask service that receives randomized reports."""
