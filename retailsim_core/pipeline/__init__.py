"""The edge: the steps the Dagster assets call, and the only readers of the warehouse.

``data/`` holds the weekly data stage's steps, ``readers/`` what the model steps read (shelf
prices replayed from the observed cells, the service's inputs, the planted truth), and this
package itself the model steps: baseline fitting, training, evaluation, pricing, ONNX export.
"""
