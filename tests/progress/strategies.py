"""Hypothesis strategies for times and path summaries."""

from __future__ import annotations

from hypothesis import strategies as st

from progress import MAX_EPOCH, Delay, Product, ProductSummary

small_epochs = st.integers(min_value=0, max_value=20)
epochs = st.one_of(small_epochs, st.integers(min_value=MAX_EPOCH - 20, max_value=MAX_EPOCH))
products = st.builds(Product, small_epochs, small_epochs)
nested_products = st.builds(Product, products, small_epochs)

delays = st.one_of(
    st.builds(Delay, st.integers(0, 20)), st.builds(Delay, st.integers(MAX_EPOCH - 20, MAX_EPOCH))
)
product_summaries = st.builds(ProductSummary, st.integers(0, 5), st.integers(0, 5))
