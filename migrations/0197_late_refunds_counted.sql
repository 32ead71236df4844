-- Late money refunded in full is money the order gave back (issue 44):
-- `checkout::late` now writes it to `orders.refunded_minor` in the
-- transaction that decides it, where a staff refund adds its own, so the
-- orders export, the admin and the API read one amount. Orders decided
-- before that get the same amount here: a late payment matched its
-- order's amount, and an order whose holds ended unpaid had no staff
-- refund before it (staff refund paid orders only). No trigger reads
-- this column, so no event is sent for the correction.
update orders
   set refunded_minor = amount_minor
 where late_money = 'refunded' and refunded_minor = 0;

-- An order as the JSON API and the order events show it (0090) says what
-- was given back of it: staff refunds and late money refunded in full.
create or replace function hf_order_view(p_order uuid) returns jsonb
language sql stable as $$
    select hf_webhook_order(o.id)
           || jsonb_build_object(
                  'settling', case when o.settle_method is not null
                                   then jsonb_build_object('method', o.settle_method,
                                                           'until', o.settling_until) end,
                  'late_money', o.late_money,
                  'refunded_minor', o.refunded_minor)
      from orders o where o.id = p_order
$$;
