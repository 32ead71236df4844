-- Reconciliation: the worker asks the provider what became of a payment
-- page when neither the webhook nor the shopper's return told us. Each
-- order with a provider session is checked until a check is final (the
-- provider can no longer take money for it, and what it took has gone
-- through the confirm routine).

alter table orders
    -- not before this time (a lease while a worker checks; then a backoff)
    add column reconcile_after    timestamptz,
    -- when the final check was made; null while checks remain
    add column reconciled_at      timestamptz,
    add column reconcile_attempts integer not null default 0,
    -- what the last check found, for staff
    add column reconcile_note     text,
    add constraint reconcile_attempts_non_negative check (reconcile_attempts >= 0),
    add constraint reconcile_note_short check (length(reconcile_note) <= 500);

-- the reconciler's queue: only orders still to be checked are indexed
create index orders_to_reconcile on orders (updated_at)
    where reconciled_at is null and provider_session_id is not null;

-- Releasing a Razorpay order used to queue the closing of a Stripe page
-- under the Razorpay order's id; Stripe answers 404 and the job was
-- retried for ever. Razorpay orders cannot be closed: those jobs are done.
update outbox_jobs j
   set state = 'done', done_at = now(),
       last_error = 'a Razorpay order has no payment page to close'
  from orders o
 where j.kind = 'expire_session' and j.state = 'pending'
   and o.id = (j.payload->>'order_id')::uuid and o.provider = 'razorpay';

-- Orders settled more than a day before reconciliation existed are not
-- asked about again: the paths that settled them had their day, and a
-- shop's whole history should not land on the providers' APIs at once.
update orders
   set reconciled_at = now(), reconcile_note = 'settled before reconciliation existed'
 where state <> 'pending' and updated_at < now() - interval '1 day';
